-- the numbers the utilization-change page states (docs/methods.md §1.7, Zhu et al. Fig. 10), one
-- row: per resource, the windows with a finite relative change from the previous window
-- (n_cpu_changes, n_memory_changes) and the share of them whose |change| < $change_threshold
-- (share_below_threshold_cpu_change, _memory_change; NULL without any); change_threshold itself;
-- n_windows_with_use = windows where the cluster used any CPU or memory (the page says it when
-- no change is left to draw). headline_key names the number the index shows beside the page's
-- link and condition what it holds under.
with

changes as (
    select
        count(*) filter (where isfinite(cpu_change)) as n_cpu_changes,
        avg(case when abs(cpu_change) < $change_threshold then 1.0 else 0.0 end)
            filter (where isfinite(cpu_change)) as share_below_threshold_cpu_change,
        count(*) filter (where isfinite(memory_change)) as n_memory_changes,
        avg(case when abs(memory_change) < $change_threshold then 1.0 else 0.0 end)
            filter (where isfinite(memory_change)) as share_below_threshold_memory_change,
        count(*) filter (where used_cpu > 0 or used_memory > 0) as n_windows_with_use,
    from agg_utilization_change
),

final as (
    select
        n_cpu_changes,
        share_below_threshold_cpu_change,
        n_memory_changes,
        share_below_threshold_memory_change,
        $change_threshold as change_threshold,
        n_windows_with_use,
        'share_below_20pct_cpu_change' as headline_key,
        printf(
            '%,d changes of cluster CPU use between consecutive 5-minute windows', n_cpu_changes
        ) as condition,
    from changes
)

select * from final
