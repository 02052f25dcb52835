"""The one error type the command line turns into a one-line reason and a non-zero exit."""


class TracelabError(Exception):
    """A failure the user can act on: the message names the file and what to do."""
