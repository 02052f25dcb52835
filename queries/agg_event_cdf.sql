-- cumulative event counts over time (docs/methods.md §1.4, Zhu et al. Observations 1-6, method 3-1):
-- new submissions (a task's first SUBMIT in the data), all submissions, schedules, completions
-- (FINISH). cdf_* = cumulative count / the series' own total (raw CDF, 0..1); weighted_* = cumulative
-- count / total new submissions (the paper's weighted CDF: raw CDF x total / total new submissions).
-- time 0 (before the window) is the first point; events at 2^63-1 (after the window) are left out
-- of the series and of the totals.
with

events as (
    select
        time,
        event,
        incarnation,
    from fct_task_transitions
    where time < $time_after_window_us
        and event in ('submit', 'schedule', 'finish')
),

per_time as (
    select
        time,
        count(*) filter (where event = 'submit' and incarnation = 1) as new_submissions,
        count(*) filter (where event = 'submit') as submissions,
        count(*) filter (where event = 'schedule') as schedules,
        count(*) filter (where event = 'finish') as completions,
    from events
    group by time
),

cumulative as (
    select
        *,
        cast(sum(new_submissions) over running_total as bigint) as cum_new_submissions,
        cast(sum(submissions) over running_total as bigint) as cum_submissions,
        cast(sum(schedules) over running_total as bigint) as cum_schedules,
        cast(sum(completions) over running_total as bigint) as cum_completions,
    from per_time
    window running_total as (order by time rows between unbounded preceding and current row)
),

totals as (
    select
        sum(new_submissions) as total_new_submissions,
        sum(submissions) as total_submissions,
        sum(schedules) as total_schedules,
        sum(completions) as total_completions,
    from per_time
),

final as (
    select
        cumulative.time,
        cumulative.new_submissions,
        cumulative.submissions,
        cumulative.schedules,
        cumulative.completions,
        cumulative.cum_new_submissions,
        cumulative.cum_submissions,
        cumulative.cum_schedules,
        cumulative.cum_completions,
        cumulative.cum_new_submissions / nullif(totals.total_new_submissions, 0) as cdf_new_submissions,
        cumulative.cum_submissions / nullif(totals.total_submissions, 0) as cdf_submissions,
        cumulative.cum_schedules / nullif(totals.total_schedules, 0) as cdf_schedules,
        cumulative.cum_completions / nullif(totals.total_completions, 0) as cdf_completions,
        cumulative.cum_new_submissions / nullif(totals.total_new_submissions, 0)
            as weighted_new_submissions,
        cumulative.cum_submissions / nullif(totals.total_new_submissions, 0) as weighted_submissions,
        cumulative.cum_schedules / nullif(totals.total_new_submissions, 0) as weighted_schedules,
        cumulative.cum_completions / nullif(totals.total_new_submissions, 0) as weighted_completions,
    from cumulative
    cross join totals
    order by cumulative.time
)

select * from final
