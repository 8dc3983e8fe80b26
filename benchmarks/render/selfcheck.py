"""Launch ``toporender`` with or without its output check, for the paired self-check row of ``bench.py``.

``python benchmarks/render/selfcheck.py on|off ARGS...`` runs the CLI as the console script does, ``off`` with
:func:`toporender.pipeline.verify_output` replaced by a no-op (so the validation package is not even
imported). Both variants start the same way, so the difference of their whole-process times is what the
check costs a render. Only the benchmark does this: toporender itself has no switch that skips the check.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    mode, argv = sys.argv[1], sys.argv[2:]
    if mode not in ("on", "off"):
        raise SystemExit("usage: selfcheck.py on|off TOPORENDER-ARGS...")
    import toporender.pipeline

    if mode == "off":
        toporender.pipeline.verify_output = lambda *args: None  # type: ignore[assignment]
    from toporender.cli import main

    sys.argv = ["toporender", *argv]
    main()
