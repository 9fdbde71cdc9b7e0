//! One queue on a real local Redis Cluster of three masters: one hash tag
//! per partition, jobs spread over the nodes, each delivered once.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use support::{deliver_all, partitioned_cluster_queue, RedisCluster};
use tiered_timer_jobs::{JobId, Queue};

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_queue_spreads_over_the_cluster_and_delivers_each_job_once() {
    let cluster = RedisCluster::start(3);
    let producer = partitioned_cluster_queue(&cluster).await;
    let mut ids = HashSet::new();
    for i in 0..60u64 {
        ids.insert(
            producer
                .schedule(Duration::from_millis(i % 20), format!("{i}"))
                .await
                .unwrap(),
        );
    }
    let more = producer
        .schedule_many((0..60u64).map(|i| (Duration::from_millis(i % 20), format!("m{i}"))))
        .await
        .unwrap();
    ids.extend(more);
    assert_eq!(producer.pending().await.unwrap(), 120);
    // The partitions' tags hash to slots on every node.
    for node in &cluster.nodes {
        let keys: u64 = node.job_keys().parse().unwrap();
        assert!(keys > 0, "node {} holds none of the queue", node.port);
    }
    // Idempotent and cancellable across partitions too.
    let fixed = producer
        .schedule_with_id("order-42", Duration::from_secs(3600), b"x".to_vec())
        .await
        .unwrap();
    assert_eq!(
        producer
            .schedule_with_id("order-42", Duration::ZERO, b"y".to_vec())
            .await
            .unwrap(),
        fixed
    );
    assert!(producer.cancel(&fixed).await.unwrap());

    let mut queues = Vec::new();
    for _ in 0..3 {
        queues.push(partitioned_cluster_queue(&cluster).await);
    }
    let delivered = deliver_all(queues, ids.len(), WAIT).await;
    let unique: HashSet<JobId> = delivered.iter().cloned().collect();
    assert_eq!(unique.len(), delivered.len(), "a job was delivered twice");
    assert_eq!(unique, ids);
    assert_eq!(producer.pending().await.unwrap(), 0);
}

#[tokio::test]
async fn a_waiting_worker_is_woken_on_a_cluster() {
    let cluster = RedisCluster::start(3);
    let queue = Queue::builder(&cluster.url(), "wake")
        .cluster()
        .partitions(3)
        .connect()
        .await
        .unwrap();
    queue
        .schedule(Duration::from_secs(3600), b"later".to_vec())
        .await
        .unwrap();
    let worker = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.next().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Published on whichever node holds its partition, heard on the
    // subscriber's node: cluster pub/sub is broadcast.
    let soon = queue
        .schedule(Duration::from_millis(50), b"soon".to_vec())
        .await
        .unwrap();
    let job = tokio::time::timeout(WAIT, worker)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(job.id(), &soon);
    job.ack().await.unwrap();
}
