-- each histogram is a distribution: 100 non-negative shares summing to 1 (rounding aside)
with

final as (
    select
        job_id,
        task_index,
        list_sum(h) as total,
        list_min(h) as smallest,
        len(h) as n_bins,
    from fct_task_usage_histograms
    where abs(list_sum(h) - 1) > 1e-9 or list_min(h) < 0 or len(h) <> 100
)

select * from final
