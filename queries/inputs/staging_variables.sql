-- the derive tunables the staging views read: a view takes no parameters, so each is a DuckDB
-- variable (getvariable('production_priority')), set on the connection before the views
set variable production_priority = $production_priority
