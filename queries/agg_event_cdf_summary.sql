-- the numbers the event-CDF page states (docs/methods.md §1.4, Zhu et al. Figs. 2-3), one row:
-- total_<series> = the largest running count cum_<series> of agg_event_cdf (its total over the
-- window; 0 without rows) for new submissions, submissions, schedules and completions;
-- weighted_submissions_end, weighted_completions_end = those totals over the new submissions'
-- (NULL without any new submission); end_day = the latest time in days from the window start.
-- headline_key names the number the index shows beside the page's link and condition what it
-- holds under.
with

totals as (
    select
        coalesce(max(cum_new_submissions), 0) as total_new_submissions,
        coalesce(max(cum_submissions), 0) as total_submissions,
        coalesce(max(cum_schedules), 0) as total_schedules,
        coalesce(max(cum_completions), 0) as total_completions,
        max(time) filter (where time < $time_after_window_us) as end_time,
    from agg_event_cdf
),

final as (
    select
        total_new_submissions,
        total_submissions,
        total_schedules,
        total_completions,
        total_submissions / nullif(total_new_submissions, 0) as weighted_submissions_end,
        total_completions / nullif(total_new_submissions, 0) as weighted_completions_end,
        (greatest(end_time, $window_start_us) - $window_start_us) / 86400000000 as end_day,
        'total_new_submissions' as headline_key,
        printf(
            'tasks first submitted in the loaded parts, from before the window to day %.2f',
            (greatest(end_time, $window_start_us) - $window_start_us) / 86400000000
        ) as condition,
    from totals
)

select * from final
