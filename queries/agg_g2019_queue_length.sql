-- google-2019: instances waiting to be scheduled, per timestamp (parallel to agg_queue_length).
-- waiting = pending or queued (v3's batch queue); each event moves an instance into or out of
-- waiting by fct_g2019_instance_transitions' state_before -> state_after, counted only once the
-- instance's SUBMIT is in the data (incarnation >= 1): an instance whose history predates the data
-- never enters, so its SCHEDULE is not subtracted (its SUBMIT was never added) and is counted in
-- unqueued_schedules, and on any window of the data the queue counts the waiting instances whose
-- SUBMIT lies in it. queued_length counts the instances in the batch queue (QUEUE .. ENABLE).
-- time 0 (before the window) is the first point; events at 2^63-1 (after it) are left out.
with

tracked as (
    select
        time,
        event_type,
        state_before,
        state_after,
        incarnation - (event_type = 0)::int >= 1 as tracked_before,
        incarnation >= 1 as tracked_after,
    from fct_g2019_instance_transitions
    where time < $time_after_window_us
),

moves as (
    select
        time,
        event_type,
        tracked_before,
        coalesce(tracked_before and state_before in ('pending', 'queued'), false)
            as waiting_before,
        tracked_after and state_after in ('pending', 'queued') as waiting_after,
        coalesce(tracked_before and state_before = 'queued', false) as queued_before,
        tracked_after and state_after = 'queued' as queued_after,
    from tracked
),

per_time as (
    select
        time,
        count(*) filter (where event_type = 0) as submits,
        count(*) filter (where event_type = 3) as schedules,
        count(*) filter (where event_type = 3 and not tracked_before) as unqueued_schedules,
        count(*) filter (where event_type = 1) as queues,
        count(*) filter (where event_type = 2) as enables,
        count(*) filter (where waiting_before and event_type = 4) as pending_evicts,
        count(*) filter (where waiting_before and event_type = 5) as pending_fails,
        count(*) filter (where waiting_before and event_type = 7) as pending_kills,
        count(*) filter (where waiting_before and event_type = 8) as pending_losts,
        sum(waiting_after::int - waiting_before::int) as queue_change,
        sum(queued_after::int - queued_before::int) as queued_change,
    from moves
    group by time
),

final as (
    select
        time,
        submits,
        schedules,
        unqueued_schedules,
        queues,
        enables,
        pending_evicts,
        pending_fails,
        pending_kills,
        pending_losts,
        cast(queue_change as bigint) as queue_change,
        cast(sum(queue_change) over running_total as bigint) as queue_length,
        cast(sum(queued_change) over running_total as bigint) as queued_length,
    from per_time
    window running_total as (order by time rows between unbounded preceding and current row)
    order by time
)

select * from final
