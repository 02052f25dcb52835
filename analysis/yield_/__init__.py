"""The stage ``yield``: VCSched yield maximisation (the package takes the stage's name with PEP 8's
trailing underscore, ``yield`` being a Python keyword)."""
