-- fct_g2019_instance_usage_stats: one row per instance; min <= p50 <= p90 <= p95 <= p99 <= max
-- and min <= mean <= max for inst (and for avg where present), std >= 0, inst_max > 0
with

duplicates as (
    select
        collection_id,
        instance_index,
    from fct_g2019_instance_usage_stats
    group by collection_id, instance_index
    having count(*) > 1
),

disordered as (
    select
        collection_id,
        instance_index,
    from fct_g2019_instance_usage_stats
    where not (
        inst_min <= inst_p50 + 1e-12
        and inst_p50 <= inst_p90 + 1e-12
        and inst_p90 <= inst_p95 + 1e-12
        and inst_p95 <= inst_p99 + 1e-12
        and inst_p99 <= inst_max + 1e-12
        and inst_min <= inst_mean + 1e-12
        and inst_mean <= inst_max + 1e-12
        and inst_std >= 0
        and inst_max > 0
        and n_windows >= 1
    )
    or not coalesce(
        avg_min <= avg_p50 + 1e-12
        and avg_p50 <= avg_p90 + 1e-12
        and avg_p90 <= avg_p95 + 1e-12
        and avg_p95 <= avg_p99 + 1e-12
        and avg_p99 <= avg_max + 1e-12
        and avg_max <= 1
        and avg_std >= 0,
        true
    )
),

final as (
    select * from duplicates
    union all
    select * from disordered
)

select * from final
