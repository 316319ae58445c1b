//! `GET /management/v1/applications`: the applications the token may read.
//!
//! The list is the union of the applications described in `applications.toml` in the dataset
//! root (read once at start) and those with an `application_id=<id>` folder (listed on each
//! call), filtered by the token's applications, ascending by id:
//!
//! ```toml
//! [[applications]]
//! id = 1001
//! name = "Shop (Android)"
//! time_zone_name = "Europe/Berlin"   # optional, default "UTC"
//! ```
//!
//! An application with a folder but no entry is named by its id (`"1001"`) in `UTC`, the zone
//! of the dataset's dates.

use axum::Json;
use axum::extract::State;
use serde::Serialize;

pub use crate::applications::{APPLICATIONS_FILE, Application, ApplicationDirectory};
use crate::auth::ReadAccess;
use crate::error::ApiError;
use crate::state::AppState;

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ApplicationList {
    pub applications: Vec<Application>,
}

/// The handler.
pub async fn list_applications(
    State(state): State<AppState>,
    ReadAccess(caller): ReadAccess,
) -> Result<Json<ApplicationList>, ApiError> {
    let discovered = state.engine().storage().applications().await?;
    let applications = state
        .applications()
        .list(&discovered)
        .into_iter()
        .filter(|app| caller.principal.may_access(app.id))
        .collect();
    Ok(Json(ApplicationList { applications }))
}
