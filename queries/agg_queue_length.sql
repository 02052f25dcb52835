-- tasks waiting to be scheduled, per timestamp (docs/methods.md §1.3, Zhu et al. method 3-2):
-- queue change = SUBMIT - SCHEDULE - pFAIL - pKILL - pLOST, summed from zero over time.
-- the paper leaves pending EVICTs out of the queue; we keep its series as queue_length_paper and
-- publish queue_length, which also subtracts pEVICT, so the omission's share of Observation 7 shows.
-- waiting = pending or queued (google-2019's batch queue: QUEUE .. ENABLE moves a task within the
-- waiting ones; google-2011 has neither event, so its queued_length is 0 throughout).
-- a task leaves the queue (SCHEDULE or a p-death) only when it waits since a SUBMIT in the data: the
-- last event before it, UPDATE_*, QUEUE and ENABLE aside, is a SUBMIT. a SCHEDULE whose SUBMIT
-- predates the data (as when the loaded parts start mid-trace) is not subtracted, as its SUBMIT
-- was never added: it is counted in unqueued_schedules instead. This mirrors agg_running_tasks,
-- which does not subtract a death whose SCHEDULE predates the data: on any window of parts, the
-- queue counts the waiting tasks whose SUBMIT lies in the loaded parts.
-- time 0 (before the window) is the first point: tasks pending at the window start.
-- events at 2^63-1 (after the window) have no place on a time axis and are left out.
with

collapsed as (
    select
        time,
        event,
        death_phase,
        -- the last event before this one other than QUEUE / ENABLE
        last_value(case when event not in ('queue', 'enable') then event end ignore nulls) over (
            partition by job_id, task_index
            order by event_seq
            rows between unbounded preceding and 1 preceding
        ) = 'submit' as waiting_before,
        prev_event,
    from fct_task_transitions_collapsed
),

events as (
    select
        time,
        event,
        coalesce(waiting_before, false) as waiting_before,
        coalesce(waiting_before and prev_event = 'queue', false) as queued_before,
    from collapsed
    where time < $time_after_window_us
        and (
            event in ('submit', 'schedule', 'queue', 'enable')
            or death_phase in ('pending', 'queued')
        )
),

per_time as (
    select
        time,
        count(*) filter (where event = 'submit') as submits,
        count(*) filter (where event = 'schedule') as schedules,
        count(*) filter (where event = 'schedule' and not waiting_before) as unqueued_schedules,
        count(*) filter (where event = 'queue') as queues,
        count(*) filter (where event = 'enable') as enables,
        count(*) filter (where waiting_before and event = 'evict') as pending_evicts,
        count(*) filter (where waiting_before and event = 'fail') as pending_fails,
        count(*) filter (where waiting_before and event = 'kill') as pending_kills,
        count(*) filter (where waiting_before and event = 'lost') as pending_losts,
        -- into the batch queue from waiting, out of it by ENABLE, SCHEDULE or a death
        count(*) filter (where event = 'queue' and waiting_before)
            - count(*) filter (where queued_before) as queued_change,
    from events
    group by time
),

changes as (
    select
        *,
        submits - (schedules - unqueued_schedules) - pending_fails - pending_kills - pending_losts
            as queue_change_paper,
        submits - (schedules - unqueued_schedules) - pending_fails - pending_kills - pending_losts
            - pending_evicts as queue_change,
    from per_time
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
        queue_change_paper,
        queue_change,
        cast(sum(queue_change_paper) over running_total as bigint) as queue_length_paper,
        cast(sum(queue_change) over running_total as bigint) as queue_length,
        cast(sum(queued_change) over running_total as bigint) as queued_length,
    from changes
    window running_total as (order by time rows between unbounded preceding and current row)
    order by time
)

select * from final
