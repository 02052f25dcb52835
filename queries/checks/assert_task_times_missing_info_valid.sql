-- fct_task_times: a missing-info code is one the trace's format documents (stg_task_events'
-- missing_info_known: google-2011's 0, 1, 2, google-2019's missing_type 1-5) and belongs to a
-- record the incarnation has (a SCHEDULE that started its run, a terminal event)
with

unknown_codes as (
    select distinct missing_info from stg_task_events
    where not missing_info_known
),

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
    where submit_missing_info in (select missing_info from unknown_codes)
        or schedule_missing_info in (select missing_info from unknown_codes)
        or end_missing_info in (select missing_info from unknown_codes)
        or (schedule_missing_info is not null and schedule_time is null)
        or (end_missing_info is not null and end_time is null)
)

select * from final
