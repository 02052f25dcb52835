-- task times by hour of scheduling (docs/methods.md §1.5, Zhu et al. Figs. 6-7), one row per hour
-- (hour = schedule_time // 1 h, µs since the trace's time 0) that has an incarnation scheduled in
-- the window (schedule_time from window_start_us, before 2^63-1). day = the hour's start in days
-- from the window's start (the figures' axis). n_scheduled = those incarnations;
-- scheduling_mean_s = their mean scheduling time (SUBMIT -> SCHEDULE, s; NULL when none is known).
-- execution_mean_s is a restricted mean (agg_task_times_window): over the incarnations scheduled at
-- least horizon_us before window_end_us whose execution is known or still running at the end, the
-- mean of execution_time_s capped at the horizon, one still running counting as the horizon;
-- n_censored = those still running. Every one was observed a whole horizon, so the mean cannot fall
-- from censoring alone. Hours after window_end_us - horizon_us have NULL execution_mean_s and
-- n_censored. The means add in the table's own row order, so two runs give the same bits.
with

timed as (
    select
        fct_task_times.schedule_time // 3600000000 as hour,
        fct_task_times.job_id,
        fct_task_times.task_index,
        fct_task_times.incarnation,
        fct_task_times.schedule_time,
        fct_task_times.terminal_event_type is null as running,
        fct_task_times.scheduling_time_s,
        fct_task_times.execution_time_s,
    from fct_task_times
    where fct_task_times.schedule_time is not null
        and fct_task_times.schedule_time < $time_after_window_us
        and fct_task_times.schedule_time >= $window_start_us
),

scheduling as (
    select
        hour,
        count(*) as n_scheduled,
        avg(scheduling_time_s order by job_id, task_index, incarnation) as scheduling_mean_s,
    from timed
    group by hour
),

execution as (
    select
        timed.hour,
        avg(
            case
                when timed.running then agg_task_times_window.horizon_us / 1e6
                else least(timed.execution_time_s, agg_task_times_window.horizon_us / 1e6)
            end
            order by timed.job_id, timed.task_index, timed.incarnation
        ) as execution_mean_s,
        count(*) filter (where timed.running) as n_censored,
    from timed
    cross join agg_task_times_window
    where timed.schedule_time
        <= agg_task_times_window.window_end_us - agg_task_times_window.horizon_us
        and (timed.running or timed.execution_time_s is not null)
    group by timed.hour
),

final as (
    select
        scheduling.hour,
        (scheduling.hour * 3600000000 - $window_start_us) / 86400000000 as day,
        scheduling.n_scheduled,
        scheduling.scheduling_mean_s,
        execution.execution_mean_s,
        execution.n_censored,
    from scheduling
    left join execution on scheduling.hour = execution.hour
    order by scheduling.hour
)

select * from final
