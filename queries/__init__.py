"""The derived tables' SQL, one file per table (``<table>.sql``) and invariants in ``checks/``.

A package only so that the SQL ships in the wheel and is read as package resources.
"""
