//! The management API: `GET /management/v1/applications`, the applications the token may
//! read, and `GET /management/v1/application/{id}`, one of them.
//!
//! The applications are the union of those described in `applications.toml` in the dataset
//! root (read once at start) and those with an `application_id=<id>` folder (listed on each
//! call), ascending by id:
//!
//! ```toml
//! [[applications]]
//! id = 1001
//! name = "Shop (Android)"
//! time_zone_name = "Europe/Berlin"   # optional, an IANA zone; default "UTC"
//! create_date = 2026-09-15           # optional; default: the first date folder
//! ```
//!
//! An application is answered with the fields of the original API that this dataset can fill
//! ([`Application`]): `id`, `name` (its id without an entry), `time_zone_name` (`UTC`, the zone
//! of the dataset's dates, without one), `time_zone_offset` (now, in seconds), `permission`
//! (`view`) and `create_date` (the entry's, else the date of the first `date=` folder, listed
//! on each call; absent when there is neither). The original's other fields are left out: the
//! API keys (`api_key128`, `import_token`) are secrets; the owner (`uid`, `owner_login`,
//! `permission_date`) and the settings of the analytics service (`category`, `label`,
//! `label_id`, `hide_address`, `gdpr_agreement_accepted`, `bundle_id`, `team_id`,
//! `use_universal_links`, `universal_link`) are nowhere in an export's dataset.
//!
//! An application outside the token's list is 403 whether it exists or not, as in the export;
//! 404 only tells a token allowed every application that there is no such application.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use chrono::{NaiveDate, Utc};
use futures::{StreamExt, TryStreamExt};
use logs_core::{RequestError, Storage};
use serde::Serialize;

use crate::applications::{Application, ApplicationDirectory};
use crate::auth::ReadAccess;
use crate::error::ApiError;
use crate::json::json_response;
use crate::state::AppState;

/// How many applications' date folders the list asks for at once.
const LISTINGS_AT_ONCE: usize = 8;

/// The answer of `GET /management/v1/applications`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ApplicationList {
    pub applications: Vec<Application>,
}

/// The answer of `GET /management/v1/application/{id}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ApplicationAnswer {
    pub application: Application,
}

/// The handler of the list.
pub(crate) async fn list_applications(
    State(state): State<AppState>,
    ReadAccess(caller): ReadAccess,
) -> Result<JsonBody<ApplicationList>, ApiError> {
    let storage = state.engine().storage();
    let directory = state.applications();
    let discovered = storage.applications().await?;
    let now = Utc::now();
    let applications = futures::stream::iter(directory.ids(&discovered))
        .filter(|&id| std::future::ready(caller.principal.may_access(id)))
        .map(|id| async move {
            let first = first_date(storage, directory, id).await?;
            Ok::<_, ApiError>(directory.application(id, first, now))
        })
        .buffered(LISTINGS_AT_ONCE)
        .try_collect()
        .await?;
    Ok(JsonBody(ApplicationList { applications }))
}

/// The handler of one application.
pub(crate) async fn get_application(
    State(state): State<AppState>,
    ReadAccess(caller): ReadAccess,
    Path(id): Path<String>,
) -> Result<JsonBody<ApplicationAnswer>, ApiError> {
    let id = parse_id(&id)?;
    if !caller.principal.may_access(id) {
        return Err(ApiError::ApplicationDenied { application_id: id });
    }
    let storage = state.engine().storage();
    let directory = state.applications();
    if !directory.describes(id) && !storage.applications().await?.contains(&id) {
        return Err(ApiError::ApplicationNotFound { application_id: id });
    }
    let first = first_date(storage, directory, id).await?;
    Ok(JsonBody(ApplicationAnswer { application: directory.application(id, first, Utc::now()) }))
}

/// The date of application `id`'s first date folder, when its answer needs it.
async fn first_date(
    storage: &Storage,
    directory: &ApplicationDirectory,
    id: i64,
) -> Result<Option<NaiveDate>, ApiError> {
    if !directory.needs_first_date(id) {
        return Ok(None);
    }
    Ok(storage.dates(id).await?.first().copied())
}

/// The path's `{id}`: an integer, as the export's `application_id`.
fn parse_id(text: &str) -> Result<i64, ApiError> {
    text.parse::<i64>().map_err(|_| {
        ApiError::InvalidParameter(RequestError::new(
            "id",
            format!(
                "is `{}`; expected an application id, an integer from {} to {}",
                logs_core::error::quote(text),
                i64::MIN,
                i64::MAX
            ),
        ))
    })
}

/// `value` as a JSON answer with [`JSON_CONTENT_TYPE`] (a value that cannot be written as JSON
/// is a bug: 500).
#[derive(Debug, Clone)]
pub(crate) struct JsonBody<T>(T);

impl<T: Serialize> IntoResponse for JsonBody<T> {
    fn into_response(self) -> Response {
        match serde_json::to_vec(&self.0) {
            Ok(bytes) => json_response(bytes),
            Err(e) => ApiError::Internal(format!("cannot write the answer as JSON: {e}")).into_response(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_an_integer() {
        assert_eq!(parse_id("1001").unwrap(), 1001);
        for bad in ["", "abc", "1001.0", "99999999999999999999", " 1", "1e3"] {
            let problem = parse_id(bad).unwrap_err().problem();
            assert_eq!(problem.status, http::StatusCode::BAD_REQUEST, "{bad}");
            assert_eq!(problem.location.as_deref(), Some("id"), "{bad}");
        }
    }
}
