//! HTTP dates as Unix seconds: IMF-fixdate (the only format a server sends) and the two
//! obsolete formats a server must still accept in `If-Modified-Since` and friends
//! (RFC 9110 section 5.6.7), RFC 850 and asctime.
//!
//! `httpdate` formats IMF-fixdate and parses all three; it formats nothing else, so the
//! other two are rebuilt here from the fields of its IMF-fixdate (the weekday's long
//! name is the one thing it does not spell).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The long weekday names of RFC 850, each starting with the short one.
const LONG_DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

fn system_time(t: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(u64::try_from(t).expect("a time after 1970"))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn imf_date(t: i64) -> String {
    httpdate::fmt_http_date(system_time(t))
}

/// The fields of [`imf_date`]: (`Sun`, `06`, `Nov`, `1994`, `08:49:37`).
fn imf_fields(t: i64) -> (String, String, String, String, String) {
    let imf = imf_date(t);
    let f: Vec<&str> = imf.split(' ').collect();
    assert!(f.len() == 6 && f[5] == "GMT", "httpdate wrote {imf:?}");
    let day = f[0].trim_end_matches(',');
    (
        day.into(),
        f[1].into(),
        f[2].into(),
        f[3].into(),
        f[4].into(),
    )
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`.
pub fn rfc850_date(t: i64) -> String {
    let (wday, day, month, year, time) = imf_fields(t);
    let long = LONG_DAYS
        .iter()
        .find(|l| l.starts_with(wday.as_str()))
        .expect("a weekday");
    format!("{long}, {day}-{month}-{} {time} GMT", &year[2..])
}

/// `Sun Nov  6 08:49:37 1994`.
pub fn asctime_date(t: i64) -> String {
    let (wday, day, month, year, time) = imf_fields(t);
    format!(
        "{wday} {month} {:>2} {time} {year}",
        day.trim_start_matches('0')
    )
}

/// An IMF-fixdate as Unix seconds; `None` for anything else, the other two formats
/// included.
pub fn parse_imf_date(s: &str) -> Option<i64> {
    let t = httpdate::parse_http_date(s).ok()?;
    // httpdate also takes the obsolete formats and surrounding blanks: only its own
    // output is an IMF-fixdate.
    (httpdate::fmt_http_date(t) == s).then(|| secs_of(t))
}

/// Unix seconds of `t`.
pub fn secs_of(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Unix seconds now.
pub fn unix_now() -> i64 {
    secs_of(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9110's example, 1994-11-06 08:49:37 UTC.
    const RFC_EXAMPLE_SECS: i64 = 784_111_777;

    #[test]
    fn the_three_formats_of_rfc_9110() {
        assert_eq!(imf_date(RFC_EXAMPLE_SECS), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(
            rfc850_date(RFC_EXAMPLE_SECS),
            "Sunday, 06-Nov-94 08:49:37 GMT"
        );
        assert_eq!(asctime_date(RFC_EXAMPLE_SECS), "Sun Nov  6 08:49:37 1994");
        // A two-digit day in asctime, and a year of this century in RFC 850.
        let t = 1_767_225_600 + 86_400 * 9 + 3_661; // 2026-01-10 01:01:01, a Saturday
        assert_eq!(imf_date(t), "Sat, 10 Jan 2026 01:01:01 GMT");
        assert_eq!(rfc850_date(t), "Saturday, 10-Jan-26 01:01:01 GMT");
        assert_eq!(asctime_date(t), "Sat Jan 10 01:01:01 2026");
    }

    #[test]
    fn every_format_parses_back_to_its_time() {
        for t in [RFC_EXAMPLE_SECS, unix_now(), unix_now() - 3600, 951_782_400] {
            for f in [imf_date, rfc850_date, asctime_date] {
                let parsed = httpdate::parse_http_date(&f(t)).unwrap();
                assert_eq!(secs_of(parsed), t, "{}", f(t));
            }
            assert_eq!(parse_imf_date(&imf_date(t)), Some(t));
        }
    }

    #[test]
    fn only_an_imf_fixdate_is_one() {
        assert_eq!(
            parse_imf_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(RFC_EXAMPLE_SECS)
        );
        for s in [
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            " Sun, 06 Nov 1994 08:49:37 GMT",
            "Mon, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "",
        ] {
            assert_eq!(parse_imf_date(s), None, "{s:?}");
        }
    }
}
