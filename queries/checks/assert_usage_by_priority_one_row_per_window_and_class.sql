-- two rows per window (production, non_production), none with negative requests or usage
with

duplicates as (
    select
        window_index,
        priority_class,
        count(*) as n_rows,
    from agg_usage_by_priority
    group by window_index, priority_class
    having count(*) > 1
),

negatives as (
    select
        window_index,
        priority_class,
        1 as n_rows,
    from agg_usage_by_priority
    -- requests are rebuilt from float steps: allow rounding noise
    where requested_cpu < -1e-9 or requested_memory < -1e-9 or used_cpu < 0 or used_memory < 0
),

final as (
    select * from duplicates
    union all
    select * from negatives
)

select * from final
