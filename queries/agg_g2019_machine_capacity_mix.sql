-- google-2019: the capacity mix of the cell, the parallel of google-2011's agg_machine_capacity_mix
-- (same columns): machines and their total capacity per (CPU, memory) capacity at the window's
-- start and at its end. v3 machine event types: 1 ADD, 2 REMOVE, 3 UPDATE. a machine's state is
-- that of its last machine_events row in (time, source_file, source_row) order: up after ADD or
-- UPDATE, down after REMOVE; its capacity is that row's capacity_cpus / capacity_memory.
-- window_start: the rows before $window_start_us (time 0 = before the window); window_end: every
-- row before 2^63-1. capacities are normalized (the largest machine = 1); a machine whose
-- capacity the trace leaves out is counted in the (null, null) row, its totals null.
with

machine_events as (
    select
        time,
        machine_id,
        type as event_type,
        capacity_cpus as cpus,
        capacity_memory as memory,
        source_file,
        source_row,
    from machine_events
    where time < $time_after_window_us
),

snapshots as (
    select
        'window_start' as snapshot,
        $window_start_us as before_time,
    union all
    select
        'window_end' as snapshot,
        $time_after_window_us as before_time,
),

last_state as (
    select
        snapshots.snapshot,
        machine_events.machine_id,
        machine_events.event_type,
        machine_events.cpus,
        machine_events.memory,
    from snapshots
    inner join machine_events on machine_events.time < snapshots.before_time
    qualify row_number() over (
        partition by snapshots.snapshot, machine_events.machine_id
        order by machine_events.time desc, machine_events.source_file desc,
            machine_events.source_row desc
    ) = 1
),

final as (
    select
        snapshot,
        cpus,
        memory,
        count(*) as machines,
        -- every row of a group has the same capacity: a product, where a float sum would
        -- depend on the order the threads add in
        count(*) * cpus as cpus_total,
        count(*) * memory as memory_total,
    from last_state
    where event_type in (1, 3)
    group by snapshot, cpus, memory
    order by snapshot = 'window_end', cpus nulls first, memory nulls first
)

select * from final
