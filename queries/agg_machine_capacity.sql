-- machines and their capacity over time, per timestamp of the trace's machine events
-- (stg_machine_events: every trace whose staging provides it).
-- per machine, in (time, source_file, source_row) order, a machine is up after ADD or UPDATE and
-- down after REMOVE; its capacity is that of its last ADD or UPDATE. each event changes the
-- totals by (after - before), so a REMOVE of a machine never added in the data changes nothing.
-- capacity is normalized (the largest machine's CPU or memory = 1); an ADD without capacity (the
-- trace blanks some) counts the machine as up, its capacity unknown: it is counted in
-- machines_without_capacity and adds nothing to the totals until an UPDATE gives one.
-- float sums add in raw-line order (source_file, source_row), the running totals in time order:
-- a sum of doubles depends on the order of its additions, which the threads' scan order would set.
-- time 0 (before the window) is the first point; events at 2^63-1 (after it) are left out.
with

states as (
    select
        time,
        machine_id,
        event,
        event in ('add', 'update') as up_after,
        case when event in ('add', 'update') then cpus end as cpus_after,
        case when event in ('add', 'update') then memory end as memory_after,
        source_file,
        source_row,
    from stg_machine_events
    where time < $time_after_window_us
),

moves as (
    select
        *,
        coalesce(lag(up_after) over machine_order, false) as up_before,
        lag(cpus_after) over machine_order as cpus_before,
        lag(memory_after) over machine_order as memory_before,
    from states
    window machine_order as (partition by machine_id order by time, source_file, source_row)
),

per_time as (
    select
        time,
        count(*) filter (where event = 'add') as adds,
        count(*) filter (where event = 'remove') as removes,
        count(*) filter (where event = 'update') as updates,
        sum(up_after::int - up_before::int) as machines_change,
        sum(coalesce(cpus_after, 0) - coalesce(cpus_before, 0) order by source_file, source_row)
            as cpus_change,
        sum(coalesce(memory_after, 0) - coalesce(memory_before, 0) order by source_file, source_row)
            as memory_change,
        sum(
            (up_after and cpus_after is null)::int - (up_before and cpus_before is null)::int
        ) as unknown_change,
    from moves
    group by time
),

final as (
    select
        time,
        adds,
        removes,
        updates,
        cast(sum(machines_change) over running_total as bigint) as machines,
        sum(cpus_change) over running_total as cpus_total,
        sum(memory_change) over running_total as memory_total,
        cast(sum(unknown_change) over running_total as bigint) as machines_without_capacity,
    from per_time
    window running_total as (order by time rows between unbounded preceding and current row)
    order by time
)

select * from final
