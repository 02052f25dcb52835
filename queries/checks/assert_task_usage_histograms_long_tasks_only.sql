-- histograms exist only for long tasks, and only for tasks in fct_task_usage_stats
with

final as (
    select
        histograms.job_id,
        histograms.task_index,
        histograms.n_windows,
        stats.is_long,
    from fct_task_usage_histograms as histograms
    left join fct_task_usage_stats as stats using (job_id, task_index)
    where stats.is_long is null
        or not stats.is_long
        or histograms.n_windows <> stats.n_windows
)

select * from final
