-- tasks in execution, per timestamp (docs/methods.md §1.3, Zhu et al. method 3-3):
-- running change = SCHEDULE - FINISH - rEVICT - rFAIL - rKILL - rLOST, summed from zero over time,
-- where r = the death (FINISH included) follows a SCHEDULE once UPDATE_* events are collapsed;
-- a death whose SCHEDULE predates the data is not subtracted, as its SCHEDULE was never added.
-- time 0 (before the window) is the first point: tasks running at the window start.
-- events at 2^63-1 (after the window) have no place on a time axis and are left out.
with

events as (
    select
        time,
        event,
        death_phase,
    from fct_task_transitions_collapsed
    where time < $time_after_window_us
        and (event = 'schedule' or death_phase = 'running')
),

per_time as (
    select
        time,
        count(*) filter (where event = 'schedule') as schedules,
        count(*) filter (where death_phase = 'running' and event = 'finish') as finishes,
        count(*) filter (where death_phase = 'running' and event = 'evict') as running_evicts,
        count(*) filter (where death_phase = 'running' and event = 'fail') as running_fails,
        count(*) filter (where death_phase = 'running' and event = 'kill') as running_kills,
        count(*) filter (where death_phase = 'running' and event = 'lost') as running_losts,
    from events
    group by time
),

changes as (
    select
        *,
        schedules - finishes - running_evicts - running_fails - running_kills - running_losts
            as running_change,
    from per_time
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
        running_change,
        cast(sum(running_change) over (
            order by time rows between unbounded preceding and current row
        ) as bigint) as running_tasks,
    from changes
    order by time
)

select * from final
