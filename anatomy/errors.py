"""The one exception type for bad input.

Anything a user can get wrong (a config value, a corpus file, a checkpoint path) raises
`AnatomyError` with a message naming the file, field or value and what was expected.
The command line prints that message, without a traceback, and exits with status 2.
"""


class AnatomyError(ValueError):
    """Bad input, explained in words."""
