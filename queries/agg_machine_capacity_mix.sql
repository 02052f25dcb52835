-- the capacity mix of the cell: machines and their total capacity per (CPU, memory) capacity,
-- at the window's start and at its end (the figures Google's colab prints per cell), over the
-- trace's machine events (stg_machine_events). a machine's state is that of its last event in
-- (time, source_file, source_row) order: up after an add or update, down after a remove; its
-- capacity is that event's. window_start: the events before $window_start_us (the machines at
-- time 0, "before the window"); window_end: every event before 2^63-1 (a remove at 2^63-1
-- happened after the window, so the machine was still up at its end). capacities are
-- normalized (the largest machine = 1); a machine whose capacity the trace blanks is counted in
-- the (null, null) row, its totals null.
with

events as (
    select
        time,
        machine_id,
        event,
        cpus,
        memory,
        source_file,
        source_row,
    from stg_machine_events
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
        events.machine_id,
        events.event,
        events.cpus,
        events.memory,
    from snapshots
    inner join events on events.time < snapshots.before_time
    qualify row_number() over (
        partition by snapshots.snapshot, events.machine_id
        order by events.time desc, events.source_file desc,
            events.source_row desc
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
    where event in ('add', 'update')
    group by snapshot, cpus, memory
    order by snapshot = 'window_end', cpus nulls first, memory nulls first
)

select * from final
