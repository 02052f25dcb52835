-- per long task, the share of its inst samples in each of 100 bins (docs/methods.md §1.9, Janus & Rzadca §3.5):
-- h[k+1] (DuckDB arrays are 1-based) = share of samples in [k/100, (k+1)/100), k = 0..99;
-- values >= 1 go to the last bin. the same tasks and samples as fct_task_usage_stats.
-- the bin comes from integer arithmetic on x*100, not floor(x / 0.01): x is rounded to 1e-9 units
-- first, so 0.47 (stored as 0.46999...) lands in bin 47 and 0.57 (57 * 0.01 = 0.5700...01) in 57.
with

long_tasks as (
    select
        job_id,
        task_index,
        n_windows,
    from fct_task_usage_stats
    where is_long
),

usage as (
    select
        task_usage.job_id,
        task_usage.task_index,
        task_usage.sampled_cpu_usage as inst,
    from task_usage
    semi join long_tasks using (job_id, task_index)
    where task_usage.sampled_cpu_usage is not null
),

binned as (
    select
        job_id,
        task_index,
        greatest(least(cast(round(inst * 1e9) as bigint) // 10000000, 99), 0) as bin,
    from usage
),

bin_counts as (
    select
        job_id,
        task_index,
        map_from_entries(list(struct_pack(k := bin, v := n))) as counts,
    from (
        select
            job_id,
            task_index,
            bin,
            count(*) as n,
        from binned
        group by job_id, task_index, bin
    )
    group by job_id, task_index
),

final as (
    select
        long_tasks.job_id,
        long_tasks.task_index,
        long_tasks.n_windows,
        cast(
            list_transform(
                range(100),
                lambda k: coalesce(bin_counts.counts[k], 0) / long_tasks.n_windows
            ) as double[100]
        ) as h,
    from long_tasks
    inner join bin_counts using (job_id, task_index)
    -- a stable row order: repeated and partitioned runs write identical files
    order by job_id, task_index
)

select * from final
