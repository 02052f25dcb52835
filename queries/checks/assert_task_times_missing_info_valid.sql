-- fct_task_times: a missing-info code is one of the format document's three (0, 1, 2) and belongs
-- to a record the incarnation has (a SCHEDULE that started its run, a terminal event)
with

final as (
    select
        job_id,
        task_index,
        incarnation,
        schedule_time,
        end_time,
        submit_missing_info,
        schedule_missing_info,
        end_missing_info,
    from fct_task_times
    where submit_missing_info not in (0, 1, 2)
        or schedule_missing_info not in (0, 1, 2)
        or end_missing_info not in (0, 1, 2)
        or (schedule_missing_info is not null and schedule_time is null)
        or (end_missing_info is not null and end_time is null)
)

select * from final
