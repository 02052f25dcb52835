-- the numbers the task-times page states (docs/methods.md §1.5, Zhu et al. Figs. 6-8), one row:
-- hours = rows of agg_task_times_hourly; scheduling_hourly_mean_s = the mean of its hourly mean
-- scheduling times (hours without a known one left out); execution_hours and
-- execution_hourly_mean_s = the same for the restricted execution means; n_censored = incarnations
-- in the execution series still running at the window's end; horizon_h = the cap (hours).
-- scheduling_median_s = the median (interpolated) scheduling time of every incarnation with one,
-- n_scheduling; finished_tasks = incarnations whose terminal event is FINISH (the trace's own code,
-- from stg_task_events) with a known execution time; finished_under_5min / _30min = the shares of
-- them under 300 s / 1800 s (0 without any). headline_key names the number the index shows beside
-- the page's link and condition what it holds under.
with

finish_code as (
    select min(event_type) as event_type
    from stg_task_events
    where event = 'finish'
),

hourly as (
    select
        count(*) as hours,
        avg(scheduling_mean_s order by hour) as scheduling_hourly_mean_s,
        count(execution_mean_s) as execution_hours,
        avg(execution_mean_s order by hour) as execution_hourly_mean_s,
        coalesce(sum(n_censored), 0) as n_censored,
    from agg_task_times_hourly
),

scheduling as (
    select
        count(scheduling_time_s) as n_scheduling,
        coalesce(median(scheduling_time_s), 0) as scheduling_median_s,
    from fct_task_times
),

finished as (
    select
        count(*) as finished_tasks,
        coalesce(avg(case when fct_task_times.execution_time_s < 300 then 1.0 else 0.0 end), 0)
            as finished_under_5min,
        coalesce(avg(case when fct_task_times.execution_time_s < 1800 then 1.0 else 0.0 end), 0)
            as finished_under_30min,
    from fct_task_times
    where fct_task_times.execution_time_s is not null
        and fct_task_times.terminal_event_type = (select event_type from finish_code)
),

final as (
    select
        hourly.hours,
        hourly.scheduling_hourly_mean_s,
        scheduling.scheduling_median_s,
        scheduling.n_scheduling,
        hourly.execution_hours,
        hourly.execution_hourly_mean_s,
        hourly.n_censored,
        agg_task_times_window.horizon_us / 3600000000 as horizon_h,
        finished.finished_tasks,
        finished.finished_under_5min,
        finished.finished_under_30min,
        'scheduling_median_s' as headline_key,
        printf(
            'all %,d task incarnations with a known scheduling time', scheduling.n_scheduling
        ) as condition,
    from hourly
    cross join scheduling
    cross join finished
    cross join agg_task_times_window
)

select * from final
