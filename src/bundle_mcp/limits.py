"""What Linux file systems accept, in one place: the concept-ID rule (okf/ids.py), the capture
walk (loader/capture.py) and the write path (storage, writes/publish.py) all hold to it."""

__all__ = ["MAX_PATH_BYTES", "NAME_MAX_BYTES"]

# One name: a folder, or a file with its extension (NAME_MAX on ext4, xfs, btrfs, tmpfs).
NAME_MAX_BYTES = 255
# A whole path below the bundle root (PATH_MAX).
MAX_PATH_BYTES = 4096
