-- google-2011's machine_events in the common machine-event shape the capacity marts read:
-- the 2011 event types 0 ADD, 1 REMOVE, 2 UPDATE (capacity changed while not removed) as
-- 'add' / 'remove' / 'update' (any other code 'other'); capacities normalized as published
-- (the largest machine's CPU or memory = 1), blank where the trace blanks them
with

machine_events_v2 as (
    select * from machine_events
),

final as (
    select
        time,
        machine_id,
        case event_type when 0 then 'add' when 1 then 'remove' when 2 then 'update'
            else 'other' end as event,
        cpus,
        memory,
        source_file,
        source_row,
    from machine_events_v2
)

select * from final
