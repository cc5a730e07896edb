"""Bundles that are not a folder on this machine: a git URL (``git+<url>[@<ref>][#<folder>]``)
or a ``.tar.gz`` / ``.zip`` archive (a path or an http(s) URL), fetched into the cache folder
and served read-only from there (README, "Remote bundles").

- :mod:`.location`: what a BUNDLE argument names, and :class:`~.location.BundleSource`, what is
  served (the commit, or the archive's digest).
- :mod:`.archive`: unpacking with the loader's defences (no links, no absolute or ``..`` paths,
  no devices, the caps counted while writing).
- :mod:`.fetch`: getting the bytes (git clone/fetch, a file or a download) and making the
  served folder, swapped in whole.
- :mod:`.mounts`: the remote bundles of one server, refreshed on a timer or SIGHUP.
"""
