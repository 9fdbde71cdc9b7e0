//! Arguments to and replies from Redis: the bytes a script argument is,
//! the parse of a reply into Rust values, and how the `redis` crate's
//! errors become the crate's [`Error`].

use redis::{FromRedisValue, Value};

use crate::contract::LeaseToken;
use crate::data::error::Error;

/// A script argument.
pub(crate) fn arg(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// A lease token as the scripts store it: the text a claim wrote. A token
/// of another kind holds no lease here (the empty text matches none).
pub(crate) fn token_text(token: &LeaseToken) -> &str {
    match token {
        LeaseToken::Text(text) => text,
        LeaseToken::Number(_) => "",
    }
}

/// One field of a script's reply (a missing one is `nil`).
pub(crate) fn parse<T: FromRedisValue>(value: Option<Value>) -> Result<T, Error> {
    let value = value.unwrap_or(Value::Nil);
    redis::from_redis_value(value).map_err(|e| Error::Redis(e.into()))
}

/// A reply that does not have the shape `what` returns.
pub(crate) fn unexpected_reply(what: &str) -> Error {
    Error::Redis(redis::RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected reply",
        what.to_owned(),
    )))
}

/// A time on Redis' clock in a reply (ms since the epoch); `None` for the
/// scripts' `-1`.
pub(crate) fn ms(value: i64) -> Option<u64> {
    u64::try_from(value).ok()
}

impl From<redis::RedisError> for Error {
    fn from(error: redis::RedisError) -> Error {
        not_redis(Error::Redis(error))
    }
}

/// `error`, or [`Error::NotRedis`] if it is a reply the `redis` crate
/// could not parse: a Redis never sends one, another server does.
pub(crate) fn not_redis(error: Error) -> Error {
    match error {
        Error::Redis(error) if error.kind() == redis::ErrorKind::Parse => Error::NotRedis(error),
        error => error,
    }
}
