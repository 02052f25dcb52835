-- alibaba-2018: usage vs request per container (the parallel of agg_usage_by_priority's request vs
-- used, per container). request and limit: the container's last container_meta row, in cores
-- (the trace's 1/100 core / 100). cpu_util_percent is read as the percentage of the container's
-- request it uses (docs/derive.md), so used cores = cpu_util_percent / 100 x cpu_request.
-- samples with cpu_util_percent outside [0, 100] (the publisher's -1 / 101 markers) are left out
-- and counted in n_invalid. two meta rows of a container at one time_stamp: the later raw line wins.
with

meta as (
    select
        container_id,
        arg_max(machine_id, (time_stamp, source_file, source_row)) as machine_id,
        arg_max(app_du, (time_stamp, source_file, source_row)) as app_du,
        arg_max(cpu_request, (time_stamp, source_file, source_row)) / 100 as cpu_request,
        arg_max(cpu_limit, (time_stamp, source_file, source_row)) / 100 as cpu_limit,
        arg_max(mem_size, (time_stamp, source_file, source_row)) as mem_size,
    from container_meta
    group by container_id
),

usage as (
    select
        container_id,
        count(*) as n_samples,
        count(*) filter (where not (cpu_util_percent between 0 and 100)) as n_invalid,
        avg(cpu_util_percent) filter (where cpu_util_percent between 0 and 100) / 100
            as cpu_util_mean,
        max(cpu_util_percent) filter (where cpu_util_percent between 0 and 100) / 100
            as cpu_util_max,
        avg(mem_util_percent) filter (where mem_util_percent between 0 and 100) / 100
            as mem_util_mean,
        min(time_stamp) as first_time,
        max(time_stamp) as last_time,
    from container_usage
    group by container_id
),

final as (
    select
        usage.container_id,
        meta.machine_id,
        meta.app_du,
        meta.cpu_request,
        meta.cpu_limit,
        meta.mem_size,
        usage.n_samples,
        usage.n_invalid,
        usage.first_time,
        usage.last_time,
        usage.cpu_util_mean,
        usage.cpu_util_max,
        usage.mem_util_mean,
        usage.cpu_util_mean * meta.cpu_request as cpu_used_mean,
        usage.cpu_util_mean as used_over_requested,
    from usage
    left join meta using (container_id)
    order by usage.container_id
)

select * from final
