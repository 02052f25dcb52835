-- tasks waiting to be scheduled, per timestamp (docs/methods.md §1.3, Zhu et al. method 3-2):
-- queue change = SUBMIT - SCHEDULE - pFAIL - pKILL - pLOST, summed from zero over time.
-- the paper leaves pending EVICTs out of the queue; we keep its series as queue_length_paper and
-- publish queue_length, which also subtracts pEVICT, so the omission's share of Observation 7 shows.
-- a SCHEDULE whose SUBMIT predates the data (it does not directly follow a SUBMIT once UPDATE_*
-- events are collapsed, as when the loaded parts start mid-trace) is not subtracted, as its SUBMIT
-- was never added: it is counted in unqueued_schedules instead. This mirrors agg_running_tasks,
-- which does not subtract a death whose SCHEDULE predates the data: on any window of parts, the
-- queue counts the waiting tasks whose SUBMIT lies in the loaded parts.
-- time 0 (before the window) is the first point: tasks pending at the window start.
-- events at 2^63-1 (after the window) have no place on a time axis and are left out.
with

events as (
    select
        time,
        event_type,
        death_phase,
        prev_event_type,
    from fct_task_transitions_collapsed
    where time < $time_after_window_us
        and (event_type in (0, 1) or death_phase = 'pending')
),

per_time as (
    select
        time,
        count(*) filter (where event_type = 0) as submits,
        count(*) filter (where event_type = 1) as schedules,
        count(*) filter (
            where event_type = 1 and prev_event_type is distinct from 0
        ) as unqueued_schedules,
        count(*) filter (where death_phase = 'pending' and event_type = 2) as pending_evicts,
        count(*) filter (where death_phase = 'pending' and event_type = 3) as pending_fails,
        count(*) filter (where death_phase = 'pending' and event_type = 5) as pending_kills,
        count(*) filter (where death_phase = 'pending' and event_type = 6) as pending_losts,
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
        pending_evicts,
        pending_fails,
        pending_kills,
        pending_losts,
        queue_change_paper,
        queue_change,
        cast(sum(queue_change_paper) over running_total as bigint) as queue_length_paper,
        cast(sum(queue_change) over running_total as bigint) as queue_length,
    from changes
    window running_total as (order by time rows between unbounded preceding and current row)
    order by time
)

select * from final
