"""Launch ``toporender`` with or without its output check, for the paired self-check row of ``bench.py``.

``python benchmarks/render/selfcheck.py on|off ARGS...`` runs the CLI as the console script does, ``off`` with
:func:`toporender.pipeline.verify_output` replaced by a no-op and, for a render spread over worker processes
(which check their chunks themselves, with :func:`toporender.validation.output_problems`, and bound the
annotations placement adds with :func:`toporender.validation.annotations_fit`), the validation package replaced
by a module whose checks find nothing (so the package is not even imported; forked workers inherit the
stand-in). Both variants start the same way, so the difference of their whole-process times is what the check
costs a render. Only the benchmark does this: toporender itself has no switch that skips the check.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    mode, argv = sys.argv[1], sys.argv[2:]
    if mode not in ("on", "off"):
        raise SystemExit("usage: selfcheck.py on|off TOPORENDER-ARGS...")
    import toporender.pipeline

    if mode == "off":
        import types

        toporender.pipeline.verify_output = lambda *args: None  # type: ignore[assignment]
        stand_in = types.ModuleType("toporender.validation")
        stand_in.output_problems = lambda *args, **kwargs: []  # type: ignore[attr-defined]
        stand_in.annotations_fit = lambda written: True  # type: ignore[attr-defined]
        sys.modules["toporender.validation"] = stand_in
    from toporender.cli import main

    sys.argv = ["toporender", *argv]
    main()
