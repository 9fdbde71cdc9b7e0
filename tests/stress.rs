use std::future::Future;
use std::pin::Pin;
use std::sync::{mpsc, Arc};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use tiered_timer::{Handle, Instant, Sleep, Timer};

struct SlowWake(Duration);
impl Wake for SlowWake {
    fn wake(self: Arc<Self>) {
        std::thread::sleep(self.0);
    }
}

fn lock_responds(handle: &Handle, within: Duration) -> bool {
    let (tx, rx) = mpsc::channel();
    let handle = handle.clone();
    std::thread::spawn(move || {
        let _ = tx.send(handle.pending());
    });
    rx.recv_timeout(within).is_ok()
}

#[test]
fn stale_now_livelock() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let timer = rt.block_on(async { Timer::new() });
    let handle = timer.handle();
    let slow = Waker::from(Arc::new(SlowWake(Duration::from_micros(400))));
    let kept = rt.block_on(async {
        let base = Instant::now();
        let x = base + Duration::from_millis(30);
        let mut sx: Vec<Sleep> = (0..100).map(|_| handle.sleep_until(x)).collect();
        for s in &mut sx {
            assert!(Pin::new(s)
                .poll(&mut Context::from_waker(&slow))
                .is_pending());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        let y = x - Duration::from_millis(1);
        let h = handle.clone();
        let slow2 = slow.clone();
        let sy = tokio::spawn(async move {
            let mut sy: Vec<Sleep> = (0..33).map(|_| h.sleep_until(y)).collect();
            for s in &mut sy {
                assert!(Pin::new(s)
                    .poll(&mut Context::from_waker(&slow2))
                    .is_pending());
            }
            while Instant::now() < y + Duration::from_micros(300) {
                std::hint::spin_loop();
            }
            sy
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        (sx, sy)
    });
    if !lock_responds(&handle, Duration::from_secs(3)) {
        std::mem::forget(kept);
        std::mem::forget(timer);
        std::mem::forget(rt);
        panic!("livelock: timer lock never released");
    }
    assert_eq!(handle.pending(), 0);
}
