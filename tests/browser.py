"""Which Chromium the browser tests drive: one that is already on the machine.

``CHROMIUM`` (a path) wins; else the first of the usual names on ``PATH``. Without one
the tests fail (never skip) with one line saying what to install; ``make test`` installs
Debian's package first when it runs as root.
"""

from __future__ import annotations

import os
import shutil

__all__ = ["MISSING", "NAMES", "chromium_path"]

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MISSING = ("no Chromium found for the browser tests: install it (Debian/Ubuntu: sudo "
           "apt-get install chromium) or set CHROMIUM=/path/to/chrome")


def chromium_path(environ: dict[str, str] | None = None, path: str | None = None) -> str:
    """The browser's executable.

    Raises:
        AssertionError: None is there (the one line above).
    """
    env = os.environ if environ is None else environ
    given = env.get("CHROMIUM")
    if given:
        assert os.path.isfile(given) and os.access(given, os.X_OK), (
            f"CHROMIUM={given} is not an executable file; {MISSING}")
        return given
    for name in NAMES:
        found = shutil.which(name, path=path)
        if found:
            return found
    raise AssertionError(MISSING)
