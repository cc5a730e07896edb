"""What Linux file systems accept, in one place: the concept-ID rule (okf/ids.py), the capture
walk (loader/capture.py) and the write path (storage, writes/publish.py) all hold to it; and the
bundle caps (:class:`Caps`), which the operator may raise or lower."""

from dataclasses import dataclass

__all__ = [
    "DEFAULT_CAPS", "MAX_PATH_BYTES", "NAME_MAX_BYTES", "Caps", "parse_count", "parse_size",
]

# One name: a folder, or a file with its extension (NAME_MAX on ext4, xfs, btrfs, tmpfs).
NAME_MAX_BYTES = 255
# A whole path below the bundle root (PATH_MAX).
MAX_PATH_BYTES = 4096


# ------------------------------------------------------------------------------ the bundle caps

_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


@dataclass(frozen=True, slots=True)
class Caps:
    """How much of a bundle is loaded: at most ``max_files`` Markdown files and ``max_bytes``
    bytes of them (and of the attachments a concept names) in all.

    The defaults are the contract's (README, "Limits"); ``serve``, ``validate`` and ``call``
    take ``--max-files`` and ``--max-bytes``. One value, handed from the command to everything
    that loads, writes or advertises a bound that is the file cap: the loader, the snapshot
    cache, the write path and the contracts (contracts/files.py substitutes it where a contract's
    bound is the file cap).
    """

    max_files: int = 10_000
    max_bytes: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_files", "max_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number, 1 or more")


DEFAULT_CAPS = Caps()


def parse_count(text: str) -> int:
    """``--max-files``: a whole number, 1 or more.

    Raises:
        ValueError: with the sentence to show.
    """
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise ValueError(f"wants a whole number of files, 1 or more, got {text!r}")
    return int(value)


def parse_size(text: str) -> int:
    """``--max-bytes``: a number of bytes, with an optional K, M or G suffix (also KiB, MiB,
    GiB; any case) meaning 1024, 1024² and 1024³ bytes: ``64M`` is 64 MiB.

    Raises:
        ValueError: with the sentence to show (zero, negative, a fraction or anything else).
    """
    value = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = value[-1:] if value[-1:] in _SIZE_UNITS else ""
    digits = value[: len(value) - len(unit)]
    if not (digits.isascii() and digits.isdigit()) or int(digits) < 1:
        raise ValueError(
            f"wants a size of 1 or more bytes, with an optional K, M or G suffix (KiB, MiB, "
            f"GiB), got {text!r}"
        )
    return int(digits) * _SIZE_UNITS[unit]
