-- alibaba-2018: one row per batch task (the parallel of fct_task_times, whose incarnation is a
-- task here: the trace keeps one row per task). schedule_time = start_time (s; NULL when 0: never
-- started), end_time NULL unless the task ended; terminal_state the status of an ended task;
-- execution_time_s = end - start of an ended task whose end is at or after its start.
-- submit_time and scheduling_time_s stay NULL: the trace records no submission time.
with

final as (
    select
        job_name,
        task_name,
        status,
        task_type,
        instance_num,
        plan_cpu,
        plan_mem,
        cast(null as bigint) as submit_time,
        case when start_time > 0 then start_time end as schedule_time,
        case when is_end and end_time > 0 then end_time end as end_time,
        case when is_end then status end as terminal_state,
        cast(null as double) as scheduling_time_s,
        case
            when is_end and start_time > 0 and end_time >= start_time
                then cast(end_time - start_time as double)
        end as execution_time_s,
    from (
        select
            *,
            status in ('Terminated', 'Failed', 'Cancelled', 'Interrupted') as is_end,
        from batch_task
    )
    order by job_name, task_name
)

select * from final
