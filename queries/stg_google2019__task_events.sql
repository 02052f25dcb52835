-- google-2019's instance_events in the common task-event shape the task marts read: a task is
-- v3's task or alloc instance, (collection_id, instance_index) as (job_id, task_index);
-- event_type keeps the v3 code and event names it in common words (0 SUBMIT, 1 QUEUE, 2 ENABLE,
-- 3 SCHEDULE, 4 EVICT, 5 FAIL, 6 FINISH, 7 KILL, 8 LOST, 9 UPDATE_PENDING, 10 UPDATE_RUNNING;
-- any other code 'other'). production = priority >= 120, the v3 production tier (free 0-99,
-- best-effort batch 100-115, mid 116-119, production 120-359, monitoring 360+).
-- missing_info: v3's missing_type of a record the trace synthesised (1-5), null for a genuine record
-- (0 or empty = MISSING_TYPE_NONE); missing_info_known: the type is one of the proto's (0-5) or
-- empty. times keep the trace's markers: 0 before the window, 2^63-1 after it.
with

instance_events_v3 as (
    select * from instance_events
),

final as (
    select
        collection_id as job_id,
        instance_index as task_index,
        time,
        type as event_type,
        case type
            when 0 then 'submit'
            when 1 then 'queue'
            when 2 then 'enable'
            when 3 then 'schedule'
            when 4 then 'evict'
            when 5 then 'fail'
            when 6 then 'finish'
            when 7 then 'kill'
            when 8 then 'lost'
            when 9 then 'update_pending'
            when 10 then 'update_running'
            else 'other'
        end as event,
        priority,
        priority >= 120 as is_production,
        case when missing_type > 0 then missing_type end as missing_info,
        coalesce(missing_type between 0 and 5, true) as missing_info_known,
        resource_request_cpus as cpu_request,
        resource_request_memory as memory_request,
        machine_id,
        source_file,
        source_row,
    from instance_events_v3
)

select * from final
