"""Files a command writes: checked before the work, written whole.

A command that writes a report or a data file (``audit-verifiers --html``,
``fidelity --html`` and ``--save-baseline``, ``review export-disagreements
--out``) calls :func:`check_output_path` on it before it does anything else,
so a mistyped folder is a one-line :class:`~mirrorworld.errors.MirrorworldError`
in a second, not after a ten-minute audit. It then writes with
:func:`write_atomic`: the bytes go to a new file beside the target, are synced,
and replace the target in one ``os.replace``, so a run that fails or is
interrupted midway leaves the old file (or none), never half a report.

The check cannot promise the write will succeed (the disk may fill, the
folder may vanish meanwhile); it catches the mistakes a person makes when
typing a path, which are nearly all of them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from mirrorworld.errors import MirrorworldError

__all__ = ["check_output_path", "write_atomic"]


def check_output_path(path: str | Path, *, new_folders: bool = False) -> Path:
    """``path`` as a :class:`~pathlib.Path`, once it is known to name a file that can be created or replaced.

    Raises :class:`~mirrorworld.errors.MirrorworldError` naming the path when
    it is a folder (an existing one, or one spelled with a trailing separator)
    or when its folder does not exist. With ``new_folders`` (for a writer that
    makes its folders, like ``review export-disagreements``) a missing folder
    is fine as long as the nearest one that exists is a folder.
    """
    shown = str(path)
    out = Path(path)
    if shown.endswith(("/", os.sep)) or out.is_dir():
        raise MirrorworldError(f"cannot write {shown}: it is a folder, not a file")
    folder = out.parent
    if folder.is_dir():
        return out
    nearest = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if nearest is not None and not nearest.is_dir():
        raise MirrorworldError(f"cannot write {shown}: {nearest} is not a folder")
    if not new_folders:
        raise MirrorworldError(f"cannot write {shown}: the folder {folder} does not exist")
    return out


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text is UTF-8) to ``path`` whole or not at all; return the path.

    The new file is created exclusively beside ``path`` (so no existing file
    or link is written through) with the usual permissions (``0o666`` less the
    umask), synced, then moved over ``path``; on any failure it is removed and
    ``path`` is untouched. An operating-system failure is one error line.
    """
    out = check_output_path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = out.with_name(f".{out.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, out)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as err:
        raise MirrorworldError(f"cannot write {path}: {err.strerror or err}") from None
    return out
