"""Prints the fixed-base comb table that smokermqtt/ed25519.py ships (run on the host).

Entry j (1..15) is sum of 2^(64*i) * B over the bits i set in j, in affine "Niels" form
(y+x, y-x, 2*d*x*y) mod p, so that signing needs 64 doublings and at most 64 mixed additions
instead of ~250 doublings and ~125 additions. tests/firmware/test_ed25519.py recomputes the table
independently and compares.

Usage: python firmware_clients/micropython/tools/gen_ed25519_table.py
"""

P = 2**255 - 19
D = (-121665 * pow(121666, P - 2, P)) % P
BY = (4 * pow(5, P - 2, P)) % P


def base_x(y):
    """x of the point with this y and even x (RFC 8032 §5.1.3)."""
    xx = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    x = pow(xx, (P + 3) // 8, P)
    if (x * x - xx) % P:
        x = x * pow(2, (P - 1) // 4, P) % P
    return P - x if x & 1 else x


def add(p1, p2):
    """Affine Edwards addition for a = -1 (slow and plain; this runs once, on the host)."""
    x1, y1 = p1
    x2, y2 = p2
    t = D * x1 * x2 * y1 * y2 % P
    x3 = (x1 * y2 + y1 * x2) * pow(1 + t, P - 2, P) % P
    y3 = (y1 * y2 + x1 * x2) * pow(1 - t, P - 2, P) % P
    return x3, y3


def comb_table():
    base = (base_x(BY), BY)
    teeth = [base]
    for _ in range(3):
        q = teeth[-1]
        for _ in range(64):
            q = add(q, q)
        teeth.append(q)
    table = []
    for j in range(1, 16):
        q = (0, 1)
        for i in range(4):
            if j >> i & 1:
                q = add(q, teeth[i])
        x, y = q
        table.append(((y + x) % P, (y - x) % P, 2 * D * x * y % P))
    return table


def main():
    print("_COMB = (")
    for ypx, ymx, xy2d in comb_table():
        print("    (%d,\n     %d,\n     %d)," % (ypx, ymx, xy2d))
    print(")")


if __name__ == "__main__":
    main()
