-- google-2019: instances in execution, per timestamp (parallel to agg_running_tasks).
-- each event moves an instance into or out of running by fct_g2019_instance_transitions'
-- state_before -> state_after, counted only from the instance's first SCHEDULE in the data on:
-- an instance whose SCHEDULE predates the data never enters, so its death is not subtracted (it
-- was never added). the death columns count deaths out of running (FINISH included).
-- time 0 (before the window) is the first point; events at 2^63-1 (after it) are left out.
with

tracked as (
    select
        time,
        event_type,
        state_before,
        state_after,
        count(*) filter (where event_type = 3) over (
            partition by collection_id, instance_index
            order by event_seq
            rows between unbounded preceding and current row
        ) as schedules_so_far,
    from fct_g2019_instance_transitions
    where time < $time_after_window_us
),

moves as (
    select
        time,
        event_type,
        coalesce(
            schedules_so_far - (event_type = 3)::int >= 1 and state_before = 'running', false
        ) as running_before,
        schedules_so_far >= 1 and state_after = 'running' as running_after,
    from tracked
),

per_time as (
    select
        time,
        count(*) filter (where event_type = 3) as schedules,
        count(*) filter (where running_before and event_type = 6) as finishes,
        count(*) filter (where running_before and event_type = 4) as running_evicts,
        count(*) filter (where running_before and event_type = 5) as running_fails,
        count(*) filter (where running_before and event_type = 7) as running_kills,
        count(*) filter (where running_before and event_type = 8) as running_losts,
        sum(running_after::int - running_before::int) as running_change,
    from moves
    group by time
),

final as (
    select
        time,
        schedules,
        finishes,
        running_evicts,
        running_fails,
        running_kills,
        running_losts,
        cast(running_change as bigint) as running_change,
        cast(sum(running_change) over (
            order by time rows between unbounded preceding and current row
        ) as bigint) as running_instances,
    from per_time
    order by time
)

select * from final
