"""scripts/install.sh into a temporary root (``--root``): files, modes, the user, the unit with
its paths filled in (``systemd-analyze verify``), the installed command, idempotence on a second
run, uninstall and purge."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "scripts" / "install.sh"
PASSWD = "root:x:0:0:root:/root:/bin/sh\nsystemd-network:x:100:102::/:/usr/sbin/nologin\n"
GROUP = "root:x:0:\nsystemd-journal:x:100:\n"


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["sh", str(INSTALL), *args], capture_output=True, text=True, timeout=300
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"install.sh {args} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("root")
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text(PASSWD)
    (root / "etc" / "group").write_text(GROUP)
    result = run("--root", str(root), "--python", sys.executable)
    yield root, result.stdout


def test_files_modes_and_user(installed: tuple[Path, str]) -> None:
    root, out = installed
    conf = root / "etc/edge-broker/edge-broker.toml"
    assert conf.read_text() == (ROOT / "systemd/edge-broker.toml").read_text()
    assert mode(conf) == 0o640
    assert mode(root / "etc/edge-broker") == 0o750
    assert mode(root / "var/lib/edge-broker") == 0o750
    unit = root / "etc/systemd/system/edge-broker.service"
    assert mode(unit) == 0o644
    text = unit.read_text()
    assert "@PREFIX@" not in text
    assert (
        "ExecStart=/opt/edge-broker/venv/bin/edge-broker run --config "
        "/etc/edge-broker/edge-broker.toml" in text
    )
    docs = next(line for line in text.splitlines() if line.startswith("Documentation="))
    for url in docs.removeprefix("Documentation=").split():  # issue 20: no made-up URL
        assert (
            url.startswith("file:/opt/edge-broker/")
            and (root / url.removeprefix("file:/")).is_file()
        ), url
    assert "LogsDirectory=" not in text  # the broker logs to journald only
    passwd = (root / "etc/passwd").read_text().splitlines()
    group = (root / "etc/group").read_text().splitlines()
    assert (
        "edge-broker:x:101:101:edge-broker MQTT broker:/var/lib/edge-broker:/usr/sbin/nologin"
        in passwd
    )
    assert "edge-broker:x:101:" in group  # 100 is taken in both files
    assert "systemctl not called" in out


def test_installed_command_checks_the_default_config(installed: tuple[Path, str]) -> None:
    root, _ = installed
    # the script's shebang names the device path (/opt/...): start it with the image's venv python
    venv = root / "opt/edge-broker/venv/bin"
    result = subprocess.run(
        [
            str(venv / "python"),
            str(venv / "edge-broker"),
            "check",
            "--config",
            str(root / "etc/edge-broker/edge-broker.toml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "OK (1 listener(s): local tcp 127.0.0.1:1883)" in result.stdout


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify(installed: tuple[Path, str], tmp_path: Path) -> None:
    """The installed unit, its /opt paths pointed into the temporary root so the commands exist."""
    root, _ = installed
    text = (root / "etc/systemd/system/edge-broker.service").read_text()
    unit = tmp_path / "edge-broker.service"
    unit.write_text(text.replace("/opt/edge-broker/", f"{root}/opt/edge-broker/"))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    broken = tmp_path / "broken" / "edge-broker.service"
    broken.parent.mkdir()
    broken.write_text(text.replace("/opt/edge-broker/", "/nonexistent/"))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(broken)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0 and "not executable" in result.stderr  # the check can fail


def test_second_run_is_idempotent_then_uninstall_and_purge(
    tmp_path_factory: pytest.TempPathFactory, installed: tuple[Path, str]
) -> None:
    root, _ = installed
    copy = tmp_path_factory.mktemp("copy") / "root"
    shutil.copytree(root, copy, symlinks=True)
    conf = copy / "etc/edge-broker/edge-broker.toml"
    conf.write_text(conf.read_text() + "\n# edited by the operator\n")
    passwd_before = (copy / "etc/passwd").read_text()
    second = run("--root", str(copy), "--python", sys.executable, "--no-start")  # the second run
    assert "kept the existing" in second.stdout
    assert conf.read_text().endswith("# edited by the operator\n")
    assert (copy / "etc/passwd").read_text() == passwd_before
    assert (copy / "etc/group").read_text().count("edge-broker:") == 1
    assert (copy / "etc/systemd/system/edge-broker.service").read_text() == (
        root / "etc/systemd/system/edge-broker.service"
    ).read_text()

    (copy / "var/lib/edge-broker/claims.log").write_text("state")
    out = run("--root", str(copy), "--uninstall").stdout
    assert f"kept {copy}/etc/edge-broker and {copy}/var/lib/edge-broker" in out  # what it kept
    assert not (copy / "etc/systemd/system/edge-broker.service").exists()
    assert not (copy / "opt/edge-broker").exists()
    assert conf.exists() and (copy / "var/lib/edge-broker/claims.log").exists()
    run("--root", str(copy), "--uninstall", "--purge")
    assert not (copy / "etc/edge-broker").exists() and not (copy / "var/lib/edge-broker").exists()
    assert "edge-broker" not in (copy / "etc/passwd").read_text()
    assert "edge-broker" not in (copy / "etc/group").read_text()
    assert (copy / "etc/passwd").read_text() == PASSWD


def test_bad_options_say_what_to_do(tmp_path: Path) -> None:
    result = run("--root", str(tmp_path), "--prefix", "opt/x", check=False)
    assert result.returncode == 2 and "--prefix must be an absolute path" in result.stderr
    result = run("--frobnicate", check=False)
    assert result.returncode == 2 and "unknown option --frobnicate" in result.stderr
    result = run("--root", str(tmp_path), "--purge", check=False)
    assert result.returncode == 2 and "--purge goes with --uninstall" in result.stderr
    result = run("--root", str(tmp_path), "--python", "/nonexistent/python3", check=False)
    assert result.returncode == 2 and "not Python 3.11 or newer" in result.stderr
    image = tmp_path / "image"  # an image whose python3 is another version than --python
    (image / "usr/bin").mkdir(parents=True)
    (image / "usr/bin/python3").symlink_to("python3.9")
    (image / "usr/lib/python3.9").mkdir(parents=True)
    result = run("--root", str(image), "--python", sys.executable, check=False)
    assert result.returncode == 2
    assert (
        f"the image's /usr/bin/python3 is not Python {sys.version_info[0]}.{sys.version_info[1]}"
        in result.stderr
    )
    assert not (image / "opt").exists()  # refused before anything was built


DEVICE_PYTHON = Path("/usr/bin/python3")


def _device_python_matches() -> bool:
    if not DEVICE_PYTHON.exists():
        return False
    out = subprocess.run(
        [str(DEVICE_PYTHON), "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return out == str(tuple(sys.version_info[:2]))


def _in_chroot(root: Path, *command: str, user: str | None = None) -> list[str]:
    """``command`` run with ``root`` as ``/``, as on the device: the image's /usr is this
    machine's /usr (Debian's Python 3 and libc), bind-mounted in a private mount namespace."""
    userspec = f"--userspec={user} " if user else ""
    script = (
        f"mount --rbind /usr '{root}/usr' && mount --bind /dev '{root}/dev' && "
        f"mount -t proc proc '{root}/proc' && exec chroot {userspec}'{root}' "
        + " ".join(f"'{c}'" for c in command)
    )
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]


def _can_unshare() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(
    not _can_unshare() or not _device_python_matches(),
    reason="needs root with mount namespaces and a /usr/bin/python3 of this Python's X.Y",
)
def test_root_image_runs_when_root_becomes_slash(
    tmp_path_factory: pytest.TempPathFactory, installed: tuple[Path, str]
) -> None:
    """Issue 20: a --root image built with another interpreter (this venv's) runs in a chroot
    with the device's /usr/bin/python3, as the edge-broker user: shebangs, pyvenv.cfg and the
    python symlinks name device paths, and the config and state belong to the service user."""
    built, _ = installed
    root = tmp_path_factory.mktemp("image") / "root"
    subprocess.run(["cp", "-a", str(built), str(root)], check=True)  # -a: keeps the owners
    venv = root / "opt/edge-broker/venv"
    assert (venv / "bin/edge-broker").read_text().splitlines()[
        0
    ] == "#!/opt/edge-broker/venv/bin/python"
    assert str(root) not in (venv / "pyvenv.cfg").read_text()
    assert "home = /usr/bin" in (venv / "pyvenv.cfg").read_text().splitlines()
    for script in (venv / "bin").iterdir():
        if script.is_symlink():
            assert not os.readlink(script).startswith(str(root)), script
        elif script.is_file():
            assert str(root) not in script.read_text(errors="replace"), script
    uid = gid = 101
    etc = root / "etc/edge-broker"
    assert (etc.stat().st_uid, etc.stat().st_gid) == (0, gid)
    conf = etc / "edge-broker.toml"
    assert (conf.stat().st_uid, conf.stat().st_gid) == (0, gid)
    state = root / "var/lib/edge-broker"
    assert (state.stat().st_uid, state.stat().st_gid) == (uid, gid)
    tmpfiles = (root / "usr/lib/tmpfiles.d/edge-broker.conf").read_text()
    assert "z /etc/edge-broker 0750 root edge-broker -" in tmpfiles

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    conf.write_text(conf.read_text().replace("port = 1883", f"port = {port}"))
    os.chown(conf, 0, gid)
    root.chmod(0o755)  # an image's / (tmp_path_factory makes 0700 directories)
    for name in ("usr", "dev", "proc"):
        (root / name).mkdir(exist_ok=True)
    for name, target in (("lib", "usr/lib"), ("lib64", "usr/lib64"), ("bin", "usr/bin")):
        if Path("/" + name).is_symlink() and not (root / name).exists():
            (root / name).symlink_to(target)

    binary = "/opt/edge-broker/venv/bin/edge-broker"
    check = subprocess.run(
        _in_chroot(
            root,
            binary,
            "check",
            "--config",
            "/etc/edge-broker/edge-broker.toml",
            user=f"{uid}:{gid}",
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr
    assert f"OK (1 listener(s): local tcp 127.0.0.1:{port})" in check.stdout

    env = {**os.environ, "EDGE_BROKER_STATE_DIR": "/var/lib/edge-broker"}  # as the unit sets it
    env.pop("PYTHONPATH", None)
    broker = subprocess.Popen(
        _in_chroot(
            root,
            binary,
            "run",
            "--config",
            "/etc/edge-broker/edge-broker.toml",
            user=f"{uid}:{gid}",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                if broker.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"the installed broker did not start:\n{broker.communicate()[0]}"
                    ) from None
                time.sleep(0.2)
        with conn:  # MQTT 3.1.1 CONNECT, clean session → CONNACK accepted
            conn.sendall(bytes([0x10, 12, 0, 4]) + b"MQTT" + bytes([4, 2, 0, 60, 0, 0]))
            assert conn.recv(4) == bytes([0x20, 2, 0, 0])
    finally:
        broker.terminate()
        out = broker.communicate(timeout=30)[0]
    assert broker.returncode == 0, out
    assert "Traceback" not in out
    assert any(p.name == "broker.log" for p in state.rglob("*")), list(state.rglob("*"))


def test_root_build_says_what_it_built_where(installed: tuple[Path, str]) -> None:
    """Under --root nothing is installed on this machine: each line names the file it wrote
    under DIR, never a device path as if it had been created (issue 29 row 13)."""
    root, out = installed
    assert "install.sh: created /opt/edge-broker/venv" not in out
    assert "into /opt/edge-broker/venv" not in out
    assert (
        f"created the virtual environment {root}/opt/edge-broker/venv "
        "(on the device: /opt/edge-broker/venv)"
    ) in out
    assert f"into {root}/opt/edge-broker/venv" in out
    assert "nothing was installed on this machine" in out
    built = [
        line.removeprefix("install.sh:").strip()
        for line in out.splitlines()
        if line.startswith(f"install.sh:   {root}/")
    ]
    assert len(built) == 6, out
    for path in built:
        assert Path(path).exists(), path


def test_installed_docs_resolve_every_link(installed: tuple[Path, str]) -> None:
    """The doc folder holds every page the README and the docs link, as in the source tree
    (issue 29 row 13: only README.md and operations.md were installed)."""
    import re

    root, _ = installed
    doc = root / "opt/edge-broker/doc"
    pages = sorted(doc.rglob("*.md"))
    assert doc / "README.md" in pages and doc / "docs/operations.md" in pages
    assert {p.name for p in (ROOT / "docs").glob("*.md")} <= {p.name for p in pages}
    checked = 0
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            assert (page.parent / target).is_file(), f"{page.relative_to(doc)} links {target}"
            checked += 1
    assert checked > 20  # README's and docs/README.md's links at least
