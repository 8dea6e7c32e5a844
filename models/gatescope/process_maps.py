"""What this process has mapped, read from /proc/self/maps (Linux)."""


def library_mapped(fragment):
    """Whether a file whose path contains `fragment` is mapped into this process: a shared
    library that was loaded or preloaded (False where /proc cannot be read)."""
    try:
        with open("/proc/self/maps") as f:
            return any(fragment in line for line in f)
    except OSError:
        return False
