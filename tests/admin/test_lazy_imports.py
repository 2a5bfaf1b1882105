"""h11 and the admin package are imported only when ``[admin]`` or ``[metrics]`` is enabled: the
run path of a broker without them never loads them (resident memory on a 512 MB board)."""

from __future__ import annotations

import subprocess
import sys


def test_the_run_path_does_not_import_h11_or_the_admin_package() -> None:
    code = (
        "import sys\n"
        "import edge_broker.cli.broker, edge_broker.ops.service, edge_broker.broker.server\n"
        "import edge_broker.config\n"
        "loaded = [m for m in sys.modules if m == 'h11' or m.startswith('edge_broker.admin')]\n"
        "print(loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
