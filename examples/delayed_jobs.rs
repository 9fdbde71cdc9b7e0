//! An order service that auto-cancels unpaid orders.
//!
//! Each new order schedules a callback that cancels it once the payment
//! window closes; a payment that arrives in time cancels that callback
//! instead. At shutdown, the orders whose timers never fired are printed
//! (a real service would persist them and re-arm them on restart).
//!
//! ```text
//! cargo run --example delayed_jobs
//! ```
//!
//! The payment window is 300 ms here so the example finishes quickly; in a
//! shop it would be 30 minutes, with no other change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tiered_timer::{Handle, Scheduled, Timer};

const PAYMENT_WINDOW: Duration = Duration::from_millis(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    AwaitingPayment,
    Paid,
    Cancelled,
}

/// Each order's status, and its auto-cancel timer while that may still run.
type Book = HashMap<u32, (Status, Option<Scheduled>)>;

/// The service: orders, and each unpaid order's auto-cancel timer.
#[derive(Clone)]
struct Orders {
    inner: Arc<Mutex<Book>>,
    timer: Handle,
}

impl Orders {
    fn new(timer: Handle) -> Orders {
        Orders {
            inner: Arc::default(),
            timer,
        }
    }

    fn place(&self, id: u32, window: Duration) {
        let orders = self.clone();
        let expire = self
            .timer
            .schedule(window, move || orders.expire(id))
            .expect("the timer is running and has no capacity limit");
        self.inner
            .lock()
            .unwrap()
            .insert(id, (Status::AwaitingPayment, Some(expire)));
        println!("order {id}: placed, must be paid within {window:?}");
    }

    /// Runs on the timer's driver task: short, no blocking.
    fn expire(&self, id: u32) {
        let mut orders = self.inner.lock().unwrap();
        if let Some((status @ Status::AwaitingPayment, timer)) = orders.get_mut(&id) {
            *status = Status::Cancelled;
            *timer = None;
            println!("order {id}: not paid in time, cancelled");
        }
    }

    fn pay(&self, id: u32) {
        let mut orders = self.inner.lock().unwrap();
        let Some((status, timer)) = orders.get_mut(&id) else {
            return;
        };
        // `cancel` returns true only if the expiry has not run and now never
        // will: the payment and the expiry cannot both win.
        match timer.take().map(|timer| timer.cancel()) {
            Some(true) => {
                *status = Status::Paid;
                println!("order {id}: paid, auto-cancel stopped");
            }
            _ => println!("order {id}: payment arrived too late, refunding"),
        }
    }

    fn status(&self, id: u32) -> Status {
        self.inner.lock().unwrap()[&id].0
    }
}

#[tokio::main]
async fn main() {
    let timer = Timer::new();
    let orders = Orders::new(timer.handle());

    for id in 1..=4 {
        orders.place(id, PAYMENT_WINDOW);
    }
    // Order 5 has a long window: it is still pending at shutdown.
    orders.place(5, Duration::from_secs(3600));

    tokio::time::sleep(Duration::from_millis(100)).await;
    orders.pay(1);
    orders.pay(3);

    tokio::time::sleep(PAYMENT_WINDOW).await;
    orders.pay(4); // too late: its timer already fired

    println!();
    for id in 1..=5 {
        println!("order {id}: {:?}", orders.status(id));
    }
    assert_eq!(orders.status(1), Status::Paid);
    assert_eq!(orders.status(2), Status::Cancelled);
    assert_eq!(orders.status(4), Status::Cancelled);

    println!("\nshutting down; timers that never fired:");
    let unfired = timer.shutdown();
    for (id, deadline) in orders.never_fired() {
        let due_in = deadline - tiered_timer::Instant::now();
        println!(
            "  order {id}: auto-cancel was due in {due_in:.0?} (persist it, re-arm on restart)"
        );
    }
    assert_eq!(unfired.len(), orders.never_fired().len());
    // Dropping the callbacks instead of running them: the orders stay open.
    drop(unfired);
}

impl Orders {
    /// Orders whose auto-cancel neither ran nor was stopped by a payment.
    fn never_fired(&self) -> Vec<(u32, tiered_timer::Instant)> {
        let orders = self.inner.lock().unwrap();
        let mut ids: Vec<_> = orders
            .iter()
            .filter_map(|(id, (_, timer))| timer.as_ref().map(|t| (*id, t)))
            .filter(|(_, t)| !t.is_expired() && !t.is_cancelled())
            .map(|(id, t)| (id, t.deadline()))
            .collect();
        ids.sort();
        ids
    }
}
