-- the observation window of the task-time series (docs/methods.md §1.5, Zhu et al. Figs. 6-7), one
-- row: window_end_us = the latest schedule or end time inside the window (markers 0 and 2^63-1 are
-- no time; the window's start when there is none); horizon_us = a third of the window from its
-- start (window_start_us) to window_end_us, in whole hours, at least one hour. The execution series
-- is right-censored at window_end_us, so agg_task_times_hourly caps execution times at the horizon
-- and keeps only incarnations scheduled at least a horizon before the end.
with

times as (
    select schedule_time as t from fct_task_times
    union all
    select end_time as t from fct_task_times
),

latest as (
    select max(t) as t
    from times
    where t is not null and t < $time_after_window_us
),

window_end as (
    -- no time, or only time 0, inside the window: the window's start
    select coalesce(nullif(t, 0), $window_start_us) as window_end_us
    from latest
),

final as (
    select
        window_end_us,
        greatest(
            (greatest(window_end_us - $window_start_us, 0) // 3600000000) // 3, 1
        ) * 3600000000 as horizon_us,
    from window_end
)

select * from final
