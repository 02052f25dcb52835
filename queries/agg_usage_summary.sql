-- the numbers the usage page states (docs/methods.md §1.6, Zhu et al. Fig. 9), one row:
-- covered_windows = the windows of agg_usage_by_priority some task_usage record covers (the page
-- needs 2); production_share_of_used_cpu = production's share of all CPU used over them (NULL when
-- none was used); production_cpu_used_over_requested = production's CPU used over its request
-- (NULL when it requested none), from agg_usage_by_class. headline_key names the number the index
-- shows beside the page's link and condition what it holds under.
with

covered as (
    select count(*) as covered_windows
    from (
        select window_start
        from agg_usage_by_priority
        group by window_start
        having sum(usage_records) > 0
    )
),

classes as (
    select
        sum(used_cpu order by priority_class) as used_cpu,
        coalesce(sum(used_cpu) filter (where priority_class = 'production'), 0)
            as production_used_cpu,
        coalesce(sum(requested_cpu) filter (where priority_class = 'production'), 0)
            as production_requested_cpu,
    from agg_usage_by_class
),

final as (
    select
        covered.covered_windows,
        classes.production_used_cpu / nullif(classes.used_cpu, 0) as production_share_of_used_cpu,
        classes.production_used_cpu / nullif(classes.production_requested_cpu, 0)
            as production_cpu_used_over_requested,
        'production_share_of_used_cpu' as headline_key,
        printf(
            'sums over %,d 5-minute windows with task_usage records', covered.covered_windows
        ) as condition,
    from covered
    cross join classes
)

select * from final
