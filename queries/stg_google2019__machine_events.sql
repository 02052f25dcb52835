-- google-2019's machine_events in the common machine-event shape the capacity marts read:
-- the v3 event types 1 ADD, 2 REMOVE, 3 UPDATE (capacity changed while not removed) as
-- 'add' / 'remove' / 'update' (any other code 'other'); capacity_cpus / capacity_memory are
-- normalized as published (the largest machine = 1), absent where the export leaves them out
with

machine_events_v3 as (
    select * from machine_events
),

final as (
    select
        time,
        machine_id,
        case type when 1 then 'add' when 2 then 'remove' when 3 then 'update'
            else 'other' end as event,
        capacity_cpus as cpus,
        capacity_memory as memory,
        source_file,
        source_row,
    from machine_events_v3
)

select * from final
