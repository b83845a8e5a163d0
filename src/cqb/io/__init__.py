"""Writing outputs: every file the package writes goes through
:mod:`cqb.io.files` (a temporary file renamed into place, so an interrupted
job leaves no half output, with the user's umask). The primitive itself,
``atomic_write``, lives in :mod:`cqb.sim.runfile`, since the simulation writes
its run files with it and may import nothing outside ``cqb.sim``."""
