-- scheduling and execution times never run backwards (events are ordered by time within a task)
with

final as (
    select
        job_id,
        task_index,
        incarnation,
        scheduling_time_s,
        execution_time_s,
    from fct_task_times
    where scheduling_time_s < 0 or execution_time_s < 0
)

select * from final
